"""The proof of enforcement: every runtime × every scenario, each tool counting its runs in a
file of its own, so a denied call is seen to run zero times and an allowed one once. The
matrix writes the table of ``docs/enforcement.md``."""
