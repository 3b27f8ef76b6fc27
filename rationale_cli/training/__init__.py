"""Training: the fit loop, its callbacks, checkpoints, distributed training, and the trainer
that composes them into a run directory."""
