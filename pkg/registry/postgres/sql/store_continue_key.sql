-- The HMAC key of continue tokens, shared by replicas.
SELECT continue_key FROM registry_secret
