"""What the export refuses before it writes: every object against its schemas and the policies (validate.py), and
the delivery graph as Flux's walk of the repository finds it (delivery.py)."""
