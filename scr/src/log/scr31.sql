CREATE TABLE IF NOT EXISTS `types` (
  `id` INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `name` VARCHAR(512) NOT NULL,
  UNIQUE INDEX `name` (`name`(512))
);
CREATE TABLE IF NOT EXISTS `usernames` (
  `id` INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `name` VARCHAR(512) NOT NULL,
  UNIQUE INDEX `name` (`name`(512))
);
CREATE TABLE IF NOT EXISTS `jobnames` (
  `id` INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `name` VARCHAR(512) NOT NULL,
  UNIQUE INDEX `name` (`name`(512))
);
CREATE TABLE IF NOT EXISTS `jobs` (
  `id` INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `username_id` INT UNSIGNED NOT NULL,
  `jobname_id` INT UNSIGNED NOT NULL,
  `start` DATETIME NOT NULL,
  UNIQUE INDEX `name` (`username_id`, `jobname_id`)
);
CREATE TABLE IF NOT EXISTS `transfers` (
  `id` INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `job_id` INT NOT NULL,
  `type_id` INT UNSIGNED NOT NULL,
  `dset_id` INT UNSIGNED NOT NULL,
  `dset_name` VARCHAR(512) NOT NULL,
  `start` DATETIME NOT NULL,
  `end` DATETIME NOT NULL,
  `secs` FLOAT NOT NULL,
  `bytes` FLOAT NOT NULL,
  `files` INT UNSIGNED NOT NULL,
  `bw` FLOAT NOT NULL,
  `from` BLOB NOT NULL,
  `to` BLOB NOT NULL,
  INDEX `jobid_start` (`job_id`, `start`),
  INDEX `jobid_typeid_start` (`job_id`, `type_id`, `start`),
  INDEX `typeid_start` (`type_id`, `start`)
);
CREATE TABLE IF NOT EXISTS `events` (
  `id` INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `job_id` INT NOT NULL,
  `type_id` INT UNSIGNED NOT NULL,
  `dset_id` INT UNSIGNED NULL,
  `dset_name` VARCHAR(512) NULL,
  `start` DATETIME NULL,
  `secs` FLOAT NULL,
  `note` BLOB NULL,
  INDEX `jobid_start` (`job_id`, `start`),
  INDEX `jobid_typeid_start` (`job_id`, `type_id`, `start`),
  INDEX `typeid_start` (`type_id`, `start`)
);
