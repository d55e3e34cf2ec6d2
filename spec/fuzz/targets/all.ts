// Every fuzz target, registered by importing it.
import './live';
import './mesh';
import './s3';
import './nvmeof';
import './p4';
