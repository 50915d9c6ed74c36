DROP TABLE registry_epoch;
