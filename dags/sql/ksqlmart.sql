-- ksqlMart, the shop of ksqlDB's "update a running persistent query" guide:
-- raw purchases -> valid purchases -> revenue per product.
CREATE STREAM purchases (id INT KEY, user STRING, product STRING, cost DOUBLE, quantity INT)
  WITH (value_format='JSON');

CREATE STREAM valid_purchases AS
  SELECT * FROM purchases
  WHERE cost > 0 AND quantity > 0;

CREATE TABLE purchase_stats AS
  SELECT product, COUNT(*) AS purchases, SUM(cost * quantity) AS revenue
  FROM valid_purchases
  GROUP BY product;
