"""Core: the outcome model, typed errors, the client and failure classification, the one retry engine, commands, the caller. Imports nothing above it."""
