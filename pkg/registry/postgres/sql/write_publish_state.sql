-- Publishes $1, the highest resourceVersion the transaction took, at the end
-- of the views section (write.go).
UPDATE registry_state SET resource_version = $1
