import { describePartition } from './partition-suite.js';

describePartition('us-gov-west-1', 'aws-us-gov');
