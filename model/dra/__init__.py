"""The DRA route's evidence (ResourceSlices, allocated claims) and the gate that orders the move onto it."""
