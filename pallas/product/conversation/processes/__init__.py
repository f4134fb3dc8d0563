"""Several processes on one store: each ones lease, and taking over a dead ones work."""
