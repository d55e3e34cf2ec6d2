// Every fuzz target, registered by importing it.
import './live';
import './s3';
import './nvmeof';
