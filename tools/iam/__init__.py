"""The IAM actions each function's code can perform, derived statically, against template.yaml."""
