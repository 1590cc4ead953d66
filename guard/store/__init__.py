"""Layer 2, where the patches live: the manifest and its schema, the history ref and its one
transaction, the worktree journal, undo, sharing through remotes and bundles, and the verified
cache of the fast path. Imports only guard.git below it.

(No imports here: the hooks' fast path imports guard.store.fastpath alone.)"""
