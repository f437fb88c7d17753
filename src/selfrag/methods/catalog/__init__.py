"""The built-in methods, one module or package each; every module here is imported on the
first method lookup (:mod:`selfrag.methods.factory`)."""
