"""Layer 1, talking to git: the repository, its paths and index, merges, line endings, conflict
markers, locks and atomic files. Imports nothing of patchguard but guard.errors.

(No imports here: the hooks' fast path imports modules of this package, and an `__init__` that
re-exports would pull in all of them.)"""
