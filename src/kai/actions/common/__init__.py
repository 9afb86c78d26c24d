"""Building blocks the actions share: job ordering across queues and task placement."""
