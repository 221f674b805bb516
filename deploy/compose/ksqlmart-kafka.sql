-- ksqlMart on Kafka: purchases arrive on the topic "purchases" (JSON values, the id as key);
-- the pipeline writes valid purchases and per-product revenue back to Kafka.
CREATE STREAM purchases (id INT KEY, user STRING, product STRING, cost DOUBLE, quantity INT)
  WITH (kafka_topic='purchases');

CREATE STREAM valid_purchases WITH (kafka_topic='valid_purchases') AS
  SELECT * FROM purchases
  WHERE cost > 0 AND quantity > 0;

CREATE TABLE purchase_stats WITH (kafka_topic='purchase_stats') AS
  SELECT product, COUNT(*) AS purchases, SUM(cost * quantity) AS revenue
  FROM valid_purchases
  GROUP BY product;
