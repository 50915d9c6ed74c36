-- usage_bucket maps a usage value to its histogram bucket: bucket b >= 1
-- holds [1.02^(b-1), 1.02^b), so a bucket's representative value is within
-- 1 % of every value it holds; bucket 0 holds zero and below.
CREATE OR REPLACE FUNCTION usage_bucket(v bigint) RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN v <= 0 THEN 0 ELSE 1 + floor(ln(v::float8) / ln(1.02))::smallint END
$$;
