"""Services: the application (likes, reservations, ledgers, orders) composed from primitives; each raises typed errors and offers its deferred operations as replayables."""
