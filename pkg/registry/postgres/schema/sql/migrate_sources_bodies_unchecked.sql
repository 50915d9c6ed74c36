-- Function sources are applied in name order, so a SQL function's body may
-- name a function whose file comes later: as pg_dump does, its body is not
-- checked when it is created (a call still checks it).
SET LOCAL check_function_bodies = off
