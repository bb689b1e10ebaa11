"""Models on disk: tinygpt's .npz checkpoints, Hugging Face folders, and the capped file reads."""
