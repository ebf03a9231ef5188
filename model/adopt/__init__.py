"""What the user's repository already runs, read so the export can adopt it rather than write a second one (issue 53):
the GPU access of a HelmRelease's pods, read from its values as its chart renders them (`app_template`)."""
