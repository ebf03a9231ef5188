"""What the export writes for people and for the user's gate beside the objects, from Flux's walk of the repository:
DELIVERY.md (`delivery`), POST-MERGE.md and its Chainsaw suite (`post_merge`)."""
