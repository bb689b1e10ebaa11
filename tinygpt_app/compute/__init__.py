"""What the server computes once and shares: models, traces, generations, readouts, figures."""
