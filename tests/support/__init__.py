"""Helpers shared by every test suite and the benches (one copy of each; see issue 11 part 7)."""
