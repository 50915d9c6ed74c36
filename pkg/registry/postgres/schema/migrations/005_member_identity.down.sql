DROP TABLE discovery_member;
