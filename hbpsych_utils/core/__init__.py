"""Infrastructure every stage shares: profiles, paths, external artifacts, stage outputs,
the run manifest and the papermill runner. Nothing here knows the study's science."""
