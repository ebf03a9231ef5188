"""ComponentResources and pure spec builders of the GPU platform (one component per module)."""
