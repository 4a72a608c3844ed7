"""What a new state of an object must pass before it may be stored: defaulting, pruning and
validation of built-in objects (Kubernetes' schemas and rules) and custom ones (a CRD's
structural schema and its CEL rules), CRDs themselves, tolerations."""
