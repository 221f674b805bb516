-- A small pipeline: raw purchases -> valid purchases -> per-user stats.
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE)
  WITH (value_format='JSON');

CREATE STREAM valid_purchases AS
  SELECT id, user, cost FROM purchases WHERE cost > 0
  EMIT CHANGES;

CREATE TABLE purchase_stats AS
  SELECT user, COUNT(*) AS purchases, SUM(cost) AS spent
  FROM valid_purchases
  GROUP BY user
  EMIT CHANGES;
