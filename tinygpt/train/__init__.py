"""Training: the loss, AdamW, the schedule, the Trainer, the corpus and the command line
(`python -m tinygpt.train`)."""
