"""Models of the measuring side (judge runs and their calls live here)."""
