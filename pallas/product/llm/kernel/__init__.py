"""The turn: ingress, gate, buffer, scheduler."""
