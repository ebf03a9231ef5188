"""The preview: field differences (diff.py), the plan against OUT (plan.py) and its text and JSON (render.py)."""
