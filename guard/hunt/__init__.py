"""Layer 6, the regression hunt: measuring a command across commits (compare, bisect run), the
metrics read from its output and the statistics that decide different, same or unknown."""
