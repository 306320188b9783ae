"""Wakes declarations and checks what they promise; `wake` is the entry point."""
