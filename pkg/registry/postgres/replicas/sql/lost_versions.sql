-- The versions the last failover lost: (lost_after, floor), both 0 before any.
SELECT lost_after, floor FROM registry_epoch
