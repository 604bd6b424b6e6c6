"""A run: the training loop (trainer.py) and its compiled step, what ends it (stops.py), its clocks and bounded
waits, the echo autopilot and its recorded decisions, quasi-random tuning trials, checkpoints, TensorBoard
events, optimizers and schedules, the device mesh, and the timing facts of the input against the step."""
