-- registry_next_rv is the transaction's next resourceVersion: its ticket's
-- t × 2^22 + n, n counting up from 1. Plain SQL so it is inlined: about 1 µs
-- a row where a PL/pgSQL function costs 6. A writer that stamped 2^22 or
-- more versions fails at publish (registry_wait_tickets).
CREATE OR REPLACE FUNCTION registry_next_rv() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT set_config('registry.next_rv',
        (coalesce(nullif(current_setting('registry.next_rv', true), '')::bigint, registry_take_ticket() + 1) + 1)::text,
        true)::bigint - 1
$$;
