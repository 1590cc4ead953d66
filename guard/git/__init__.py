"""Layer 1, talking to git. No imports here: the hooks' fast path imports single modules of this
package, and an `__init__` that re-exports would pull in all of them."""
