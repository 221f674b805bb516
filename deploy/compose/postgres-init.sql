-- The streamql catalog lives beside Airflow's metadata database, with its own user.
CREATE USER streamql WITH PASSWORD 'streamql';
CREATE DATABASE streamql OWNER streamql;
