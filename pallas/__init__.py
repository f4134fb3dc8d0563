"""Pallas: a QQ group-chat bot that behaves like a considerate member of the group."""
