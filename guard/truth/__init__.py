"""Layer 3, what Python will really run: the binding model (which definition a name holds after
the module runs), the effect summaries of code run at import, recorded bodies, the
interpreter's facts, slips, kept parses and the runtime probe. Imports guard.git and
guard.store below it."""
