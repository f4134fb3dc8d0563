"""Durable jobs: the worker that runs them, retry timing and periodic schedules (docs/jobs.md)."""
