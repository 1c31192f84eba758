"""HTTP glue for API Gateway (REST) functions: the resolver with its error mapping, and who the caller is."""
