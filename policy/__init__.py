"""Policies of the GPU platform (pure rules in policy/rules.py; the pulumi-policy pack in policy/__main__.py)."""
