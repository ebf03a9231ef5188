"""The program's ComponentResources, one per module, and what they alone use."""
