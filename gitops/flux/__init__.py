"""Flux's view of a GitOps repository, split as kustomize-controller splits it: building a path (`build`),
postBuild variable substitution (`varsub`), the walk from the bootstrap Kustomization (`walk`), and what it found
(`inventory`)."""
