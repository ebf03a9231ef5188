"""The only code that touches OUT: its index, the lock, the staged write with its commit point, the drift check."""
